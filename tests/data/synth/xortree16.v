// A shallow design with as many inputs as ripple16.v: eight 2-input XORs
// and ANDs side by side (one cell deep).
module xortree16 (input wire [7:0] A, input wire [7:0] B, output wire [8:0] S);
    assign S[7:0] = A ^ B;
    assign S[8] = A[7] & B[7];
endmodule
