// fp_mul - a float multiplier of any IEEE-style format (1, E, M), default
// E5M2, with the Mantis special-case rules and round-to-nearest-even: the C
// model "exact" at that format. The exponent width reaches Mantis through the
// parameter E (MANTIS_E would do too); the bias is the IEEE default.
module fp_mul #(
    parameter E = 5,
    parameter M = 2
) (
    input  wire [E+M:0] a,
    input  wire [E+M:0] b,
    output reg  [E+M:0] y
);
    localparam integer BIAS = (1 << (E - 1)) - 1;
    localparam [E-1:0] EONES = {E{1'b1}};
    localparam [2*M+1:0] LOW_GE2 = (1 << M) - 1;        // sticky bits when the product is >= 2
    localparam [2*M+1:0] LOW_LT2 = (1 << (M - 1)) - 1;  // ... when it is in [1, 2)

    wire       sign = a[E+M] ^ b[E+M];
    wire [E-1:0] ea = a[E+M-1:M], eb = b[E+M-1:M];
    wire [M-1:0] ma = a[M-1:0], mb = b[M-1:0];
    wire a_zero = ea == 0, b_zero = eb == 0;
    wire a_inf = ea == EONES && ma == 0, b_inf = eb == EONES && mb == 0;
    wire a_nan = ea == EONES && ma != 0, b_nan = eb == EONES && mb != 0;

    wire [2*M+1:0] prod = {1'b1, ma} * {1'b1, mb};
    reg  [M-1:0] mant;
    reg          guard, sticky, up;
    reg  [M:0]   mr;
    reg  [E+1:0] ebias, eres;
    always @* begin
        if (prod[2*M+1]) begin
            mant = prod[2*M:M+1]; guard = prod[M]; sticky = |(prod & LOW_GE2);
        end else begin
            mant = prod[2*M-1:M]; guard = prod[M-1]; sticky = |(prod & LOW_LT2);
        end
        up = guard & (sticky | mant[0]);
        mr = {1'b0, mant} + {{M{1'b0}}, up};
        ebias = {2'b0, ea} + {2'b0, eb} + {{(E+1){1'b0}}, prod[2*M+1]} + {{(E+1){1'b0}}, mr[M]};
        eres = ebias - BIAS[E+1:0];
        if (a_nan | b_nan | (a_inf & b_zero) | (b_inf & a_zero)) y = {1'b0, EONES, 1'b1, {(M-1){1'b0}}};
        else if (a_inf | b_inf) y = {sign, EONES, {M{1'b0}}};
        else if (a_zero | b_zero) y = {sign, {(E+M){1'b0}}};
        else if (ebias >= {2'b0, EONES} + BIAS[E+1:0]) y = {sign, EONES, {M{1'b0}}};  // overflow
        else if (ebias <= BIAS[E+1:0]) y = {sign, {(E+M){1'b0}}};                     // flush
        else y = {sign, eres[E-1:0], mr[M-1:0]};
    end
endmodule
