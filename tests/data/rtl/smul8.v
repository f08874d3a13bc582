// A signed 8x8 multiplier that does not say so (no MANTIS_SIGNED): Mantis
// must infer two's complement from the exhaustive sweep.
module smul8 (input wire [7:0] a, input wire [7:0] b, output wire [15:0] y);
    assign y = $signed(a) * $signed(b);
endmodule
