// int8_exact - exact unsigned 8x8 integer multiplier (Mantis drop-in shape 3).
module int8_exact (
    input  wire [7:0]  a,
    input  wire [7:0]  b,
    output wire [15:0] y
);
    assign y = a * b;
endmodule
