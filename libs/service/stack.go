package service

// GrowStack gives the calling goroutine a stack of 16 KiB (deep is false) or 32 KiB (deep is
// true) at once. Call it first in a goroutine that is about to run deep, such as an HTTP
// handler: net/http starts a goroutine per request (per HTTP/2 stream) with a small stack, and
// each time a stack overflows the runtime allocates one twice the size and copies the old one,
// walking every frame on it. A request through the gateway overflowed two or three times deep in
// its handler chain, where each copy walks 30-60 frames: 8-11% of the all-in-one's CPU under 16
// clients reading, 6-7% creating (the field manager's recursion). Growing before the chain
// copies the few frames above the caller once; a stack that is already large enough costs only
// the zeroing of the frame.
//
// 16 KiB holds a read through the gateway (and is still a size the runtime caches per P); a
// write needs about 32 KiB.
func GrowStack(deep bool) {
	if deep {
		growStack32(stackIndex)
		return
	}
	growStack16(stackIndex)
}

// stackIndex is read by the grow functions so that the compiler can neither drop their frames
// nor fold them.
var stackIndex = 0

// The frames leave room for the caller's frames below them and the runtime's guard, so that the
// doubling stops at 16 and 32 KiB.

//go:noinline
func growStack16(i int) byte {
	var frame [12 << 10]byte
	return frame[i]
}

//go:noinline
func growStack32(i int) byte {
	var frame [24 << 10]byte
	return frame[i]
}
