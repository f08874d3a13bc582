// An 8-bit ripple-carry adder written as a chain of full adders: the
// flow maps it to MTS45_FA cells, and its delay is the carry chain's.
module ripple16 (input wire [7:0] A, input wire [7:0] B, output wire [8:0] S);
    wire [8:0] c;
    assign c[0] = 1'b0;
    genvar i;
    generate
        for (i = 0; i < 8; i = i + 1) begin : fa
            assign S[i] = A[i] ^ B[i] ^ c[i];
            assign c[i + 1] = (A[i] & B[i]) | (c[i] & (A[i] ^ B[i]));
        end
    endgenerate
    assign S[8] = c[8];
endmodule
