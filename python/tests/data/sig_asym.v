// sig_asym - a deliberately non-commutative significand multiplier for the
// Python layer's operand-order tests: b's last mantissa bit is forced to 1,
// so p(a, b) != p(b, a) for most pairs. p = (1.a)(1.b|lsb), 2M fraction bits.
module sig_asym #(
    parameter M = 7
) (
    input  wire [M-1:0]   a,
    input  wire [M-1:0]   b,
    output wire [2*M+1:0] p
);
    wire [M:0] x = {1'b1, a};
    wire [M:0] y = {1'b1, b[M-1:1], 1'b1};
    assign p = x * y;
endmodule
