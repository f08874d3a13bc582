// mul_exact - exact significand multiplier (Mantis drop-in shape 1).
// p = (1.a)(1.b) with 2M fraction bits: every bit of the product. Mantis packs
// it with MTS_OUT_FULL, so at M <= 11 this is the C model "exact-wide"; the
// C model "exact" rounds to M bits (RNE) and is matched by bf16_mul.v instead.
module mul_exact #(
    parameter M = 7
) (
    input  wire [M-1:0]   a,
    input  wire [M-1:0]   b,
    output wire [2*M+1:0] p
);
    assign p = {1'b1, a} * {1'b1, b};
endmodule
