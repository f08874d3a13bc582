// adders.v - Yosys techmap of the full/half adders that `extract_fa` finds
// ($fa cells: Y = A ^ B ^ C, X = carry) to the liberty's MTS45_FA, or
// MTS45_HA when the carry input is constant 0. synth/synth.ys applies it
// before ABC, which cannot map multi-output cells itself.
(* techmap_celltype = "$fa" *)
module _mts_fa_map (A, B, C, X, Y);
  parameter WIDTH = 1;
  parameter _TECHMAP_CONSTMSK_C_ = 0;
  parameter _TECHMAP_CONSTVAL_C_ = 0;
  input [WIDTH-1:0] A, B, C;
  output [WIDTH-1:0] X, Y;
  genvar i;
  generate
    for (i = 0; i < WIDTH; i = i + 1) begin : bit
      if (_TECHMAP_CONSTMSK_C_[i] && !_TECHMAP_CONSTVAL_C_[i])
        MTS45_HA ha (.A(A[i]), .B(B[i]), .S(Y[i]), .CO(X[i]));
      else
        MTS45_FA fa (.A(A[i]), .B(B[i]), .CI(C[i]), .S(Y[i]), .CO(X[i]));
    end
  endgenerate
endmodule
