// A truncating significand multiplier (as rtl/mul_trunc.v, M = 3) that
// declares the format Mantis wraps around it: FP8 E4M3 in the OCP "fn" style
// (bias 7, no inf, S.1111.111 the only NaN, overflow saturates).
module sat_trunc #(
    parameter M = 3,
    parameter MANTIS_E = 4,
    parameter MANTIS_BIAS = 7,
    parameter MANTIS_IEEE = 0
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
