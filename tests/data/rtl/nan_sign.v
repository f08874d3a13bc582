// A bfloat16 multiplier that breaks one Mantis rule: its NaN result is the
// negative quiet NaN FFC0 instead of the canonical 7FC0. Everything else is
// bf16_ref. Verification must report special-case mismatches only.
module nan_sign (
    input  wire [15:0] a,
    input  wire [15:0] b,
    output wire [15:0] y
);
    wire [15:0] p;
    bf16_ref u (.a(a), .b(b), .y(p));
    assign y = p == 16'h7FC0 ? 16'hFFC0 : p;
endmodule
