// An asymmetric 4x4 multiplier (b's low bit forced to 1): tables of it
// built with the operands swapped differ from it almost everywhere.
module asym4 (input wire [3:0] a, input wire [3:0] b, output wire [7:0] y);
    assign y = a * (b | 4'd1);
endmodule
