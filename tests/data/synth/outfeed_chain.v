// An output repeated by an output read before it is assigned: O[1] repeats
// O[5], which is the XOR of O[0] and an input; O[4] and O[6] read them.
// Unsplit, Verilator 5.006 evaluated the RTL's O with stale bits, gate
// optimisation on or off (one of 80 seeded random designs).
module outfeed_chain (input wire [3:0] A, output wire [6:0] O);
    assign O[1] = O[5];
    assign O[5] = (A[3] ^ O[0]);
    assign O[3] = 1'b1;
    assign O[0] = (A[0] ^ A[1]);
    assign O[2] = ~A[2];
    assign O[6] = (O[1] & A[1]);
    assign O[4] = ~O[5];
endmodule
