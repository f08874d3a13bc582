// sweep_int4 - a 4-bit unsigned multiplier whose K low product bits are
// cleared (tests/test_flow.cpp, FlowSweep): K = 1..8. Verilator refuses
// K = 0 (a replication of 0 outside a concatenation), the way a value a
// design does not support fails its point and not the sweep.
module sweep_int4 #(
    parameter K = 1
) (
    input  wire [3:0] a,
    input  wire [3:0] b,
    output wire [7:0] y
);
    wire [7:0] full = a * b;
    wire [K-1:0] low = {K{1'b0}};
    assign y = {full[7:K], low};
endmodule
