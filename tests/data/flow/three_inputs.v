// three_inputs - a test fixture that fits no drop-in shape (three inputs).
module three_inputs (
    input  wire [7:0]  a,
    input  wire [7:0]  b,
    input  wire [7:0]  c,
    output wire [15:0] y
);
    assign y = a * b + {8'd0, c};
endmodule
