// Outputs feeding internal nets that feed later outputs, the wire declared
// before the outputs it reads. Verilator 5.006 without split variables
// evaluated the RTL's output vector once in a stale order (in=0x1 read
// 0x11 for 0x15), and the flow rejected a right netlist.
module outfeed_wire (input wire [4:0] A, input wire [4:0] B, output wire [5:0] O);
    wire t = O[0] | O[1];
    wire u = t ^ A[4];
    assign O[0] = A[0] ^ B[0];
    assign O[1] = A[1] & B[1];
    assign O[2] = u;
    assign O[3] = u & O[2] & B[4];
    assign O[4] = ~O[3];
    assign O[5] = O[4] ^ O[3] ^ O[0];
endmodule
