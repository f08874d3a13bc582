// 4-bit inputs, 8-bit output: an integer multiplier by default.
module mul4 (input wire [3:0] a, input wire [3:0] b, output wire [7:0] y);
    assign y = a * b;
endmodule
