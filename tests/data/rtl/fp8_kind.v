// An 8-bit float design (E=5, M=2 declared by parameters) and a kind given
// by MANTIS_KIND. Only its shape matters to the tests (it is not built).
module fp8_kind #(
    parameter MANTIS_KIND = "float",
    parameter MANTIS_E = 5,
    parameter MANTIS_BIAS = 15
) (
    input  wire [7:0] a,
    input  wire [7:0] b,
    output wire [7:0] y
);
    assign y = a ^ b;
endmodule
