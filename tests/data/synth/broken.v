// A design with a syntax error: the synth flow must fail with one line.
module broken(input [3:0] a, input [3:0] b, output [7:0] y);
  assign y = a * ;
endmodule
