// Outputs computed from other outputs (issue 30): O[2] is the XOR of O[0]
// and O[1], O[3] repeats O[2], and O[4..7] chain through earlier outputs.
module outfeed_xor (input wire [3:0] A, input wire [3:0] B, output wire [7:0] O);
    assign O[0] = A[0] & B[1];
    assign O[1] = A[1] & B[0];
    assign O[2] = O[0] ^ O[1];
    assign O[3] = O[2];
    assign O[4] = O[3] & A[2];
    assign O[5] = O[4] ^ O[0];
    assign O[6] = O[5];
    assign O[7] = O[6] | (A[3] & B[3]);
endmodule
