// One output port read by another (Q reads P and itself), with a constant
// bit and a bit that copies an input.
module outfeed_ports (input wire [3:0] A, input wire [3:0] B, output wire [3:0] P, output wire [4:0] Q);
    assign P = A + B;
    assign Q[0] = P[3] ^ P[0];
    assign Q[1] = Q[0] & P[1];
    assign Q[2] = 1'b0;
    assign Q[3] = A[3];
    assign Q[4] = Q[3] ^ Q[1];
endmodule
