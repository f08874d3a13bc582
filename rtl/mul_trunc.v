// mul_trunc - truncating significand multiplier (C model "trunc").
// The exact product cut toward zero to a leading one and M mantissa bits:
// a product >= 2 (bit 2M+1 set) keeps bits 2M+1..M+1, a product in [1,2)
// keeps bits 2M..M. The dropped bits are driven to zero, so Mantis' packing
// of all bits (MTS_OUT_FULL) gives the model's RTZ result at M bits.
module mul_trunc #(
    parameter M = 7
) (
    input  wire [M-1:0]   a,
    input  wire [M-1:0]   b,
    output wire [2*M+1:0] p
);
    wire [2*M+1:0] full = {1'b1, a} * {1'b1, b};
    wire [2*M+1:0] keep_ge2 = {{(M+1){1'b1}}, {(M+1){1'b0}}};
    wire [2*M+1:0] keep_lt2 = {{(M+2){1'b1}}, {M{1'b0}}};
    assign p = full & (full[2*M+1] ? keep_ge2 : keep_lt2);
endmodule
