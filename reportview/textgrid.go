package reportview

import (
	"io"
	"strings"
	"unicode/utf8"

	"pdq/internal/termsafe"
)

// grid is a text table whose numeric columns are right-aligned and the others left-aligned.
type grid struct {
	head  []string
	right []bool // per column
	rows  [][]string
}

func newGrid(head ...string) *grid {
	g := &grid{head: head, right: make([]bool, len(head))}
	return g
}

// alignRight right-aligns the named columns.
func (g *grid) alignRight(cols ...int) *grid {
	for _, c := range cols {
		g.right[c] = true
	}
	return g
}

// add appends a row; cells are escaped for the terminal (tensor names come from files).
func (g *grid) add(cells ...string) {
	for i, c := range cells {
		cells[i] = termsafe.Line(c)
	}
	g.rows = append(g.rows, cells)
}

// write prints the grid with two spaces between columns and indent before each line.
func (g *grid) write(w io.Writer, indent string) {
	width := make([]int, len(g.head))
	for _, r := range append([][]string{g.head}, g.rows...) {
		for i, c := range r {
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	var b strings.Builder
	for _, r := range append([][]string{g.head}, g.rows...) {
		b.WriteString(indent)
		for i, c := range r {
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(c))
			last := i == len(r)-1
			switch {
			case g.right[i]:
				b.WriteString(pad + c)
			case last:
				b.WriteString(c)
			default:
				b.WriteString(c + pad)
			}
			if !last {
				b.WriteString("  ")
			}
		}
		b.WriteByte('\n')
	}
	io.WriteString(w, b.String())
}
