// Package layers holds no code: its test checks the rule of docs/ARCHITECTURE.md that imports
// point one way, down the layers listed there (a package imports only packages of a lower
// layer, or its own subpackages), and that publish never reaches into the conversion pipeline.
package layers
