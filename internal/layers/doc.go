// Package layers holds no code: its test checks the rules of docs/ARCHITECTURE.md that imports
// point one way, down the layers listed there (a package imports only packages of a lower
// layer, or its own subpackages), and that the ground floor (internal/), the kernels and publish
// stand apart: they import no format or pipeline package, only the ground floor and their own tree.
package layers
