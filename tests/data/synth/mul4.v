// 4x4 unsigned multiplier: a tiny synthesis fixture.
module mul4(input [3:0] a, input [3:0] b, output [7:0] y);
  assign y = a * b;
endmodule
