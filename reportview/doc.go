// Package reportview reads the report.json that pdq convert writes and presents it: a summary per
// output, role and scheme, the worst tensors under a filter and a sort order, threshold checks for
// CI, the per-tensor differences between two runs, heatmap and histogram pictures, and one
// self-contained HTML page. It only reads reports; it never touches checkpoints.
package reportview
