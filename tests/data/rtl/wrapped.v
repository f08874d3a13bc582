// The file is not named after a module: the top is the one module here that
// no other instantiates (sig_top); sig_core comes from the same file and
// lib_or from lib_or.v in this directory (Verilator -y).
module sig_core #(parameter M = 5) (input wire [M-1:0] x, input wire [M-1:0] z, output wire [2*M+1:0] q);
    assign q = {1'b1, x} * {1'b1, z};
endmodule
module sig_top (
    input  wire [4:0]  A,
    input  wire [4:0]  B,
    output wire [11:0] P
);
    wire [4:0] bb;
    lib_or #(.W(5)) u_or (.x(B), .z(5'd0), .y(bb));
    sig_core #(.M(5)) u_core (.x(A), .z(bb), .q(P));
endmodule
