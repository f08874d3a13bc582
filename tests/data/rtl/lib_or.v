// A library module found by Verilator's -y search of the design's directory.
module lib_or #(parameter W = 4) (input wire [W-1:0] x, input wire [W-1:0] z, output wire [W-1:0] y);
    assign y = x | z;
endmodule
