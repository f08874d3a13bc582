// Output bits that equal other output bits or constants: Yosys writes the
// netlist with outputs driven from outputs (assign {O[8], O[3:2]} = ...),
// which the equivalence check must evaluate right.
module alias8 (input wire [3:0] A, input wire [3:0] B, output wire [7:0] O);
    wire [3:0] p = A & B;
    assign O = {p[3], p[3], p[2], 1'b0, p[1], p[1], 1'b0, p[0] ^ p[3]};
endmodule
