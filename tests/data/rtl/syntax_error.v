// A syntax error on line 6, which Verilator must report with file:line.
module syntax_error (
    input  wire [7:0]  a,
    input  wire [7:0]  b,
    output wire [15:0] y
);  assign y = a * ;
endmodule
