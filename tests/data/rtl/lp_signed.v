// Signedness declared with a localparam (docs/rtl.md: localparam works too).
module lp_signed (input wire [3:0] a, input wire [3:0] b, output wire [7:0] y);
    localparam MANTIS_SIGNED = 1;
    assign y = $signed(a) * $signed(b);
endmodule
