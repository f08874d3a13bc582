// mul_mbm - minimally biased multiplier (Saadat, Bokhari, Parameswaran, IEEE
// TCAD 2018), the "AFM" of ApproxTrain; bit-exact with the C model "mbm"
// (cmodel/models.c). Units of 2^-(M+1) inside:
//   x', y'  the mantissas with their last retained bit set;  s = x' + y'
//   s <  1: v = 1 + s + C
//   s >= 1: v = 2(1 + frac(s) + C/2), unless that reaches 2 (then 2s,
//           uncorrected, so the result never carries past 4)
// C = sum of 2^-k, k = 4, 6, 8, ... <= M. The result is truncated to a leading
// one and M mantissa bits (the model's RTZ output precision).
module mul_mbm #(
    parameter M = 7
) (
    input  wire [M-1:0]   a,
    input  wire [M-1:0]   b,
    output wire [2*M+1:0] p
);
    function integer corr;  // C in units of 2^-(M+1)
        input integer m;
        integer k;
        begin
            corr = 0;
            for (k = 4; k <= m; k = k + 2) corr = corr + (1 << (m + 1 - k));
        end
    endfunction
    localparam integer C = corr(M);
    localparam integer ONE = 1 << M;  // 1.0 in units of 2^-M

    wire [M-1:0] lsb = 1;
    wire [M:0]   s = {1'b0, a | lsb} + {1'b0, b | lsb};  // x' + y', units 2^-M
    integer      f, vi;                      // frac(x' + y') and the value, as integers
    reg  [M+2:0] v, vt;                      // value in [1, 4), units 2^-(M+1)
    always @* begin
        f = {{(31-M){1'b0}}, s} - ONE;
        if (!s[M]) vi = 2 * ONE + 2 * {{(31-M){1'b0}}, s} + C;
        else if (2 * f + C / 2 >= 2 * ONE) vi = 4 * {{(31-M){1'b0}}, s};
        else vi = 4 * ONE + 4 * f + C;
        v = vi[M+2:0];
        vt = v[M+2] ? {v[M+2:2], 2'b00} : {v[M+2:1], 1'b0};  // truncate to M mantissa bits
    end
    wire [2*M+1:0] vx = {{(M-1){1'b0}}, vt};
    assign p = vx << (M - 1);                // 2M fraction bits
endmodule
