// Package rules classifies checkpoint tensors: the role of each tensor in the model (routed
// expert, attention, norm, ...), the module a tensor belongs to, and the quantization layout of a
// source checkpoint. It reads names, dtypes and config.json only, never tensor data.
package rules

import (
	"regexp"
	"strings"
)

// Role is what a tensor does in a mixture-of-experts transformer.
type Role string

// The roles, in the order reports list them.
const (
	RoleRoutedExpert Role = "routed_experts"
	RoleSharedExpert Role = "shared_experts"
	RoleAttention    Role = "attention"
	RoleDenseMLP     Role = "dense_mlp"
	RoleRouter       Role = "router"
	RoleNorm         Role = "norms"
	RoleEmbedding    Role = "embeddings_and_head"
	RoleOther        Role = "other"
)

// Roles lists every role in report order.
var Roles = []Role{RoleRoutedExpert, RoleSharedExpert, RoleAttention, RoleDenseMLP, RoleRouter, RoleNorm, RoleEmbedding, RoleOther}

var (
	reRouted   = regexp.MustCompile(`\.experts\.\d+\.`)
	reShared   = regexp.MustCompile(`\.shared_experts?\.`)
	reRouter   = regexp.MustCompile(`\.mlp\.gate\.(weight|bias|e_score_correction_bias)$|\.block_sparse_moe\.gate\.weight$|\.router\.`)
	reDenseMLP = regexp.MustCompile(`\.mlp\.(gate|up|down)_proj\.`)
	reAttn     = regexp.MustCompile(`\.(self_attn|attention|attn)\.`)
	reEmbed    = regexp.MustCompile(`(^|\.)(embed_tokens|wte|lm_head|shared_head\.head|embeddings?)(\.|$)`)
)

// RoleOf classifies a tensor by name. Norms inside attention (q_a_layernorm, k_norm) count as norms.
func RoleOf(name string) Role {
	last := name
	if i := strings.LastIndexByte(name, '.'); i > 0 {
		if j := strings.LastIndexByte(name[:i], '.'); j >= 0 {
			last = name[j+1 : i] // the module's own name, e.g. "input_layernorm"
		} else {
			last = name[:i]
		}
	}
	switch {
	case reRouted.MatchString(name):
		return RoleRoutedExpert
	case reShared.MatchString(name):
		return RoleSharedExpert
	case reRouter.MatchString(name):
		return RoleRouter
	case strings.Contains(last, "norm") || strings.HasSuffix(name, "norm.weight") || strings.HasSuffix(name, "norm.bias"):
		return RoleNorm
	case reEmbed.MatchString(name):
		return RoleEmbedding
	case reAttn.MatchString(name):
		return RoleAttention
	case reDenseMLP.MatchString(name):
		return RoleDenseMLP
	}
	return RoleOther
}

// companionSuffixes are the tensor-name endings that belong to a Linear module, longest first.
var companionSuffixes = []string{
	".weight_scale_inv", ".weight_zero_point", ".weight_packed", ".weight_shape", ".weight_scale",
	".input_scale", ".weight", ".bias",
}

// ModuleOf splits a tensor name into its module and the suffix after it ("weight",
// "weight_scale_inv", ...). Names without a known suffix are their own module with suffix "".
func ModuleOf(name string) (module, suffix string) {
	for _, s := range companionSuffixes {
		if strings.HasSuffix(name, s) {
			return strings.TrimSuffix(name, s), s[1:]
		}
	}
	return name, ""
}
