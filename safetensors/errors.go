package safetensors

import "errors"

// Sentinel errors, one per kind of format violation. Returned errors wrap them with the file and
// tensor concerned; test with errors.Is.
var (
	// ErrHeaderTooSmall: the file is shorter than the 8-byte header length prefix.
	ErrHeaderTooSmall = errors.New("file shorter than the 8-byte header length")
	// ErrHeaderTooLarge: the declared header length exceeds MaxHeaderSize.
	ErrHeaderTooLarge = errors.New("header length over the limit")
	// ErrInvalidHeaderLength: the header would end past the end of the file.
	ErrInvalidHeaderLength = errors.New("header length past the end of the file")
	// ErrInvalidHeader: the header is not valid UTF-8, or not a JSON object.
	ErrInvalidHeader = errors.New("invalid header")
	// ErrHeaderDeserialization: the header JSON is malformed or has fields of the wrong type.
	ErrHeaderDeserialization = errors.New("malformed header JSON")
	// ErrUnknownDType: a tensor names a dtype the format does not define.
	ErrUnknownDType = errors.New("unknown dtype")
	// ErrUnsupportedDType: a valid dtype that the requested operation cannot handle.
	ErrUnsupportedDType = errors.New("unsupported dtype")
	// ErrInvalidOffset: tensors, sorted by offset, do not tile the data buffer from 0 (holes,
	// overlaps, duplicates).
	ErrInvalidOffset = errors.New("invalid data offsets")
	// ErrOverflow: the element count of a shape overflows.
	ErrOverflow = errors.New("shape size overflow")
	// ErrMisaligned: a tensor's byte size is not a whole number of bytes.
	ErrMisaligned = errors.New("tensor size is not a whole number of bytes")
	// ErrTensorInvalidInfo: a tensor's byte range does not match its dtype and shape.
	ErrTensorInvalidInfo = errors.New("byte range does not match dtype and shape")
	// ErrIncompleteBuffer: the data buffer is shorter or longer than the tensors it holds.
	ErrIncompleteBuffer = errors.New("data buffer size does not match the tensors")
	// ErrInvalidMetadata: __metadata__ is not a map of string to string.
	ErrInvalidMetadata = errors.New("invalid __metadata__")
	// ErrHostilePath: a weight-map entry that is not a plain file name in the checkpoint directory.
	ErrHostilePath = errors.New("shard name is not a plain file name")
	// ErrMissingShard: a shard named by the index does not exist.
	ErrMissingShard = errors.New("missing shard")
	// ErrIndexMismatch: the index and the shards disagree about which tensors exist where.
	ErrIndexMismatch = errors.New("index does not match shards")
	// ErrDuplicateTensor: a tensor name appears in two shards (or twice in one header).
	ErrDuplicateTensor = errors.New("duplicate tensor")
	// ErrInvalidIndex: model.safetensors.index.json is malformed.
	ErrInvalidIndex = errors.New("invalid index file")
	// ErrNoTensors: a directory holds no safetensors files.
	ErrNoTensors = errors.New("no safetensors files")
	// ErrWriteMismatch: a writer was given bytes that do not match the declared layout, or was
	// closed before every tensor was written exactly once.
	ErrWriteMismatch = errors.New("written bytes do not match the declared layout")
	// ErrInvalidSpec: a tensor spec given to the writer side has an empty or reserved name or a
	// negative dimension.
	ErrInvalidSpec = errors.New("invalid tensor spec")
	// ErrOutOfRange: a read asked for bytes outside the tensor, or a buffer of the wrong size.
	ErrOutOfRange = errors.New("range outside the tensor")
	// ErrShardChanged: a shard file changed size or modification time after its header was read.
	ErrShardChanged = errors.New("shard changed since it was opened")
	// ErrClosed: the checkpoint or writer was already closed.
	ErrClosed = errors.New("already closed")
)
