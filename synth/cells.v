// cells.v - behavioural models of the cells of synth/mantis45.lib, for
// gate-level simulation (Verilator) of the netlists the synth flow maps.
// Each function here must equal the liberty cell's `function`; the test
// suite checks that the C power simulator (which reads the functions from
// the liberty) and these models agree on every mapped netlist.
/* verilator lint_off DECLFILENAME */
/* verilator lint_off UNUSEDSIGNAL */
module MTS45_INV   (input A, output Y); assign Y = ~A; endmodule
module MTS45_BUF   (input A, output Y); assign Y = A; endmodule
module MTS45_NAND2 (input A, input B, output Y); assign Y = ~(A & B); endmodule
module MTS45_NAND3 (input A, input B, input C, output Y); assign Y = ~(A & B & C); endmodule
module MTS45_NOR2  (input A, input B, output Y); assign Y = ~(A | B); endmodule
module MTS45_NOR3  (input A, input B, input C, output Y); assign Y = ~(A | B | C); endmodule
module MTS45_AND2  (input A, input B, output Y); assign Y = A & B; endmodule
module MTS45_OR2   (input A, input B, output Y); assign Y = A | B; endmodule
module MTS45_XOR2  (input A, input B, output Y); assign Y = A ^ B; endmodule
module MTS45_XNOR2 (input A, input B, output Y); assign Y = ~(A ^ B); endmodule
module MTS45_AOI21 (input A1, input A2, input B, output Y); assign Y = ~((A1 & A2) | B); endmodule
module MTS45_OAI21 (input A1, input A2, input B, output Y); assign Y = ~((A1 | A2) & B); endmodule
module MTS45_MUX2  (input A, input B, input S, output Y); assign Y = S ? B : A; endmodule
module MTS45_HA    (input A, input B, output S, output CO); assign S = A ^ B; assign CO = A & B; endmodule
module MTS45_FA    (input A, input B, input CI, output S, output CO);
  assign S = A ^ B ^ CI; assign CO = (A & B) | (CI & (A | B)); endmodule
module MTS45_DFF   (input D, input CK, output reg Q); always @(posedge CK) Q <= D; endmodule
