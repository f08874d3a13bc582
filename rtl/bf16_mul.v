// bf16_mul - a complete bfloat16 multiplier (Mantis drop-in shape 2), with its
// own special-case logic following the Mantis rules (include/mantis/mul.h):
//   subnormal operands are zero; NaN in or inf x 0 -> canonical NaN 7FC0;
//   inf x finite -> signed inf; zero x finite -> signed zero;
//   the exact product is rounded to nearest even at 7 bits, then the exponent
//   is judged: above 127 -> signed inf, below -126 -> signed zero (no
//   subnormal results). Equals the C model "exact" at format bf16.
module bf16_mul (
    input  wire [15:0] a,
    input  wire [15:0] b,
    output reg  [15:0] y
);
    wire       sign = a[15] ^ b[15];
    wire [7:0] ea = a[14:7], eb = b[14:7];
    wire [6:0] ma = a[6:0], mb = b[6:0];
    wire a_zero = ea == 8'd0, b_zero = eb == 8'd0;
    wire a_inf = ea == 8'hFF && ma == 7'd0, b_inf = eb == 8'hFF && mb == 7'd0;
    wire a_nan = ea == 8'hFF && ma != 7'd0, b_nan = eb == 8'hFF && mb != 7'd0;

    wire [15:0] prod = {1'b1, ma} * {1'b1, mb};  // 14 fraction bits, in [1, 4)
    reg  [6:0]  mant;
    reg         guard, sticky, up;
    reg  [7:0]  mr;      // rounded mantissa with its carry
    reg  [9:0]  ebias;   // ea + eb + normalisation + rounding carry (result exponent + 127)
    reg  [7:0]  eres;    // result exponent field (ebias - 127, used only when in 1..254)
    always @* begin
        if (prod[15]) begin
            mant = prod[14:8]; guard = prod[7]; sticky = |prod[6:0];
        end else begin
            mant = prod[13:7]; guard = prod[6]; sticky = |prod[5:0];
        end
        up = guard & (sticky | mant[0]);
        mr = {1'b0, mant} + {7'd0, up};
        ebias = {2'b0, ea} + {2'b0, eb} + {9'd0, prod[15]} + {9'd0, mr[7]};
        eres = ebias[7:0] - 8'd127;
        if (a_nan | b_nan | (a_inf & b_zero) | (b_inf & a_zero)) y = 16'h7FC0;
        else if (a_inf | b_inf) y = {sign, 8'hFF, 7'd0};
        else if (a_zero | b_zero) y = {sign, 15'd0};
        else if (ebias >= 10'd382) y = {sign, 8'hFF, 7'd0};   // exponent > 127: overflow
        else if (ebias <= 10'd127) y = {sign, 15'd0};         // exponent < -126: flush
        else y = {sign, eres[7:0], mr[6:0]};
    end
endmodule
