// mul_mitchell - Mitchell's logarithmic significand multiplier (C model
// "mitchell"): (1+x)(1+y) ~ 1+x+y when x+y < 1, else 2(x+y). Exact in M
// bits, so no truncation is needed.
module mul_mitchell #(
    parameter M = 7
) (
    input  wire [M-1:0]   a,
    input  wire [M-1:0]   b,
    output wire [2*M+1:0] p
);
    wire [M:0]   s = a + b;                                  // x + y, units 2^-M
    wire [M+1:0] v = s[M] ? {s, 1'b0} : {2'b01, s[M-1:0]};   // value, units 2^-M
    assign p = {v, {M{1'b0}}};                               // 2M fraction bits
endmodule
