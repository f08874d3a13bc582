// int8_bam - approximate unsigned 8x8 broken-array multiplier (Mahdiani et al.,
// IEEE TCAS-I 2010, vertical break only): the array multiplier with every
// partial-product bit a[i]&b[j] of column i+j < BREAK left out, so the low
// columns' adders disappear. BREAK = 0 is exact; the error is at most
// sum_{c<BREAK} (c+1) 2^c. Ports are named like EvoApproxLib's (A, B, O):
// Mantis recognises the integer shape from the widths.
module int8_bam #(
    parameter BREAK = 6
) (
    input  wire [7:0]  A,
    input  wire [7:0]  B,
    output reg  [15:0] O
);
    integer i, j;
    always @* begin
        O = 16'd0;
        for (i = 0; i < 8; i = i + 1)
            for (j = 0; j < 8; j = j + 1)
                if (i + j >= BREAK) O = O + ({15'd0, A[i] & B[j]} << (i + j));
    end
endmodule
