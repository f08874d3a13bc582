// A bfloat16 multiplier whose mantissa depends on the exponents (it adds the
// low bit of a's exponent to the mantissa): not LUT-representable.
module exp_dependent (
    input  wire [15:0] a,
    input  wire [15:0] b,
    output wire [15:0] y
);
    wire [15:0] p;
    bf16_ref u (.a(a), .b(b), .y(p));
    wire normal = p[14:7] != 8'd0 && p[14:7] != 8'hFF;
    assign y = normal ? {p[15:7], p[6:0] ^ {6'd0, a[7]}} : p;
endmodule
