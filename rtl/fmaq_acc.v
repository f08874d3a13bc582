// fmaq_acc - the low-precision accumulator of FMAq (Mantis drop-in shape 4):
// y = Q_acc(p + s) with the sum formed exactly and cut once (floor: the
// magnitude is truncated), as in "Towards Cheaper Inference in Deep Networks
// with Lower Bit-Width Accumulators" Eq. 2/4 and the C model mts_fmaq
// (sim/fmaq.c). p is a Q(PM,PE,PB) product, s and y are Q(AM,AE,AB) values,
// all in the packed code of include/mantis/fmaq.h: from the top, zero flag,
// sign, exponent (e + bias), mantissa. Every exponent code is normal; a zero
// flag with other bits set is NaN (y = all ones).
//   NaN in -> NaN; both zero -> zero, negative only if both are; exact
//   cancellation -> +0; |sum| < R_UF = 2^-AB -> signed zero; a result above
//   R_OF saturates to +-R_OF (exponent and mantissa all ones).
// UF is the underflow switch of the C model. With UF = 0 the model keeps sums
// below R_UF, but the packed code has no exponent for them (fmaq.h), so at
// the ports both settings flush them to signed zero.
module fmaq_acc #(
    parameter PM = 7, parameter PE = 4, parameter PB = 8,
    parameter AM = 7, parameter AE = 4, parameter AB = 8,
    /* verilator lint_off UNUSEDPARAM */
    parameter UF = 1  // see above: no effect at the ports
    /* verilator lint_on UNUSEDPARAM */
) (
    input  wire [PE+PM+1:0] p,
    input  wire [AE+AM+1:0] s,
    output reg  [AE+AM+1:0] y
);
    localparam integer PEMAX = (1 << PE) - 1 - PB;  // largest unbiased exponents
    localparam integer AEMAX = (1 << AE) - 1 - AB;
    localparam integer PLSB = -PB - PM;             // weight of the smallest LSB
    localparam integer ALSB = -AB - AM;
    localparam integer L = PLSB < ALSB ? PLSB : ALSB;
    localparam integer T = PEMAX > AEMAX ? PEMAX : AEMAX;
    localparam integer W = T - L + 2;               // |p| + |s| as an integer of weight 2^L

    wire p_flag = p[PE+PM+1], s_flag = s[AE+AM+1];
    wire p_sign = p[PE+PM], s_sign = s[AE+AM];
    wire [PE-1:0] p_exp = p[PE+PM-1:PM];
    wire [AE-1:0] s_exp = s[AE+AM-1:AM];
    wire p_nan = p_flag & (|p[PE+PM-1:0]), s_nan = s_flag & (|s[AE+AM-1:0]);
    wire p_zero = p_flag & ~(|p[PE+PM-1:0]), s_zero = s_flag & ~(|s[AE+AM-1:0]);

    reg [W-1:0] pm, sm, mag, norm;
    reg         sign;
    reg [31:0]  ecode;
    integer     i, k, e;
    always @* begin
        // magnitudes as exact integers of weight 2^L
        pm = {{(W-PM-1){1'b0}}, 1'b1, p[PM-1:0]};
        pm = pm << ({{(32-PE){1'b0}}, p_exp} + PLSB - L);
        if (p_zero) pm = {W{1'b0}};
        sm = {{(W-AM-1){1'b0}}, 1'b1, s[AM-1:0]};
        sm = sm << ({{(32-AE){1'b0}}, s_exp} + ALSB - L);
        if (s_zero) sm = {W{1'b0}};
        // exact signed sum in sign-magnitude
        if (p_sign == s_sign) begin
            mag = pm + sm; sign = p_sign;
        end else if (pm >= sm) begin
            mag = pm - sm; sign = p_sign;
        end else begin
            mag = sm - pm; sign = s_sign;
        end
        k = 0;
        for (i = 0; i < W; i = i + 1) if (mag[i]) k = i;
        e = k + L;                                  // exponent of the leading one
        norm = mag << (W - 1 - k);                  // leading one at bit W-1
        ecode = e + AB;
        if (p_nan | s_nan) y = {(AE+AM+2){1'b1}};
        else if (mag == 0) y = {1'b1, (p_zero & s_zero) ? (p_sign & s_sign) : 1'b0, {(AE+AM){1'b0}}};
        else if (e < -AB) y = {1'b1, sign, {(AE+AM){1'b0}}};       // below R_UF
        else if (e > AEMAX) y = {1'b0, sign, {(AE+AM){1'b1}}};     // saturate at R_OF
        else y = {1'b0, sign, ecode[AE-1:0], norm[W-2 -: AM]};     // floor to AM bits
    end
endmodule
