// Fits no drop-in shape: a clocked multiplier (three inputs).
module no_shape (
    input  wire        clk,
    input  wire [7:0]  a,
    input  wire [7:0]  b,
    output reg  [15:0] y
);
    always @(posedge clk) y <= a * b;
endmodule
