// A seeded random design (one of 80 generated; the flow rejected this one):
// output and internal vector bits read each other in an order unlike the
// order they are assigned in, with constants and an input copy.
module outfeed_mesh (input wire [3:0] A, output wire [9:0] O);
    wire [3:0] W;
    assign O[7] = (O[0] ^ A[3]);
    assign O[6] = (O[5] | A[2]);
    assign W[2] = ((O[4] | O[2]) & O[2]);
    assign O[5] = (O[2] | W[0]);
    assign O[8] = (A[3] & W[0]);
    assign W[3] = (O[2] & W[1]);
    assign O[0] = (A[0] ^ W[1]);
    assign O[2] = (O[0] ^ A[0]);
    assign O[9] = 1'b0;
    assign W[1] = (A[0] & A[2]);
    assign O[3] = A[0];
    assign W[0] = 1'b1;
    assign O[1] = (W[2] & W[3]);
    assign O[4] = ((A[3] ^ O[0]) ^ O[7]);
endmodule
