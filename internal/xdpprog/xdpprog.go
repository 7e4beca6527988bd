// Package xdpprog builds, loads and attaches the XDP program that steers a
// job's frames into its AF_XDP socket: a frame whose EtherType is the job's
// and whose first eight payload bytes are the job's id goes to the socket
// bound to the queue it arrived on (an XSKMAP entry); every other frame, and
// a frame for a queue with no socket, passes to the kernel's stack
// unchanged, so ordinary traffic on the interface keeps flowing.
//
// The program is written with cilium/ebpf's asm package, so building
// adimpi needs no C compiler, and it is attached through a BPF link: the
// kernel detaches it when the last file descriptor of the link closes,
// which happens when the process exits for any reason, SIGKILL included.
package xdpprog

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// EtherType is the IEEE 802 "local experimental" EtherType the job's frames
// carry.
const EtherType = 0x88B5

// HeaderLen is how much of a frame the program reads: the Ethernet header
// (14 bytes) and the job id after it (8 bytes, little-endian).
const HeaderLen = 14 + 8

// Program is an attached steering program and its socket map.
type Program struct {
	prog *ebpf.Program
	xsks *ebpf.Map
	link link.Link
	// Ifindex is the interface the program is attached to.
	Ifindex int
	// Generic reports whether the program runs in generic (SKB) mode
	// rather than in the driver.
	Generic bool
}

// xdp_md field offsets and XDP action codes of the kernel's ABI.
const (
	mdData         = 0
	mdDataEnd      = 4
	mdRxQueueIndex = 16
	xdpPass        = 2
)

// instructions is the program for job: bounds check, EtherType compare, job
// id compare (two 32-bit halves), then bpf_redirect_map(xsks,
// rx_queue_index, XDP_PASS), whose fallback passes the frame on when the
// queue has no socket.
func instructions(xsksFD int, job uint64) asm.Instructions {
	// A 16-bit load on a little-endian machine sees the wire's big-endian
	// EtherType byte-swapped.
	var et [2]byte
	binary.BigEndian.PutUint16(et[:], EtherType)
	etLoaded := int32(binary.LittleEndian.Uint16(et[:]))
	return asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.LoadMem(asm.R2, asm.R6, mdData, asm.Word),
		asm.LoadMem(asm.R3, asm.R6, mdDataEnd, asm.Word),
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, HeaderLen),
		asm.JGT.Reg(asm.R4, asm.R3, "pass"),
		asm.LoadMem(asm.R5, asm.R2, 12, asm.Half),
		asm.JNE.Imm(asm.R5, etLoaded, "pass"),
		asm.LoadMem(asm.R5, asm.R2, 14, asm.Word),
		asm.JNE.Imm32(asm.R5, int32(uint32(job)), "pass"),
		asm.LoadMem(asm.R5, asm.R2, 18, asm.Word),
		asm.JNE.Imm32(asm.R5, int32(uint32(job>>32)), "pass"),
		asm.LoadMem(asm.R2, asm.R6, mdRxQueueIndex, asm.Word),
		asm.LoadMapPtr(asm.R1, xsksFD),
		asm.Mov.Imm(asm.R3, xdpPass),
		asm.FnRedirectMap.Call(),
		asm.Return(),
		asm.Mov.Imm(asm.R0, xdpPass).WithSymbol("pass"),
		asm.Return(),
	}
}

// Attach loads the program for job and attaches it to the interface
// ifindex, in generic mode when generic is set and in the driver
// otherwise. queues is the size of the socket map (the interface's number
// of receive queues). It fails when another XDP program is attached to the
// interface already.
func Attach(ifindex, queues int, job uint64, generic bool) (*Program, error) {
	xsks, err := ebpf.NewMap(&ebpf.MapSpec{Name: "adimpi_xsks", Type: ebpf.XSKMap, KeySize: 4, ValueSize: 4, MaxEntries: uint32(max(queues, 1))})
	if err != nil {
		return nil, fmt.Errorf("xdpprog: socket map: %w", err)
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         "adimpi_steer",
		Type:         ebpf.XDP,
		Instructions: instructions(xsks.FD(), job),
		License:      "Dual MIT/GPL",
		Flags:        progFlags(generic),
	})
	if err != nil {
		xsks.Close()
		return nil, fmt.Errorf("xdpprog: loading the program: %w", err)
	}
	flags := link.XDPDriverMode
	if generic {
		flags = link.XDPGenericMode
	}
	l, err := link.AttachXDP(link.XDPOptions{Program: prog, Interface: ifindex, Flags: flags})
	if err != nil {
		prog.Close()
		xsks.Close()
		return nil, fmt.Errorf("xdpprog: attaching to interface %d: %w", ifindex, err)
	}
	return &Program{prog: prog, xsks: xsks, link: l, Ifindex: ifindex, Generic: generic}, nil
}

// Steer puts the AF_XDP socket fd in the map entry of queue, so that the
// job's frames arriving on that queue go to it.
func (p *Program) Steer(queue, fd int) error {
	if err := p.xsks.Put(uint32(queue), uint32(fd)); err != nil {
		return fmt.Errorf("xdpprog: steering queue %d to socket %d: %w", queue, fd, err)
	}
	return nil
}

// ID is the kernel's id of the loaded program (as `ip link` and bpftool
// show it).
func (p *Program) ID() (int, error) {
	info, err := p.prog.Info()
	if err != nil {
		return 0, err
	}
	id, ok := info.ID()
	if !ok {
		return 0, errors.New("xdpprog: the kernel gives no program id")
	}
	return int(id), nil
}

// Close detaches the program and frees it and its map.
func (p *Program) Close() error {
	return errors.Join(p.link.Close(), p.prog.Close(), p.xsks.Close())
}

// progFlags marks the program frags-aware (BPF_F_XDP_HAS_FRAGS) in driver
// mode: a driver (veth among them) refuses a program that is not when the
// MTU exceeds a page, and the program reads only the first 22 bytes, which
// are in the first fragment. In generic mode the kernel then gathers a
// jumbo frame into page-pool pages rather than one linear buffer, no
// cheaper (docs/xdp.md), so the program stays unmarked there.
func progFlags(generic bool) uint32 {
	if generic {
		return 0
	}
	return unix.BPF_F_XDP_HAS_FRAGS
}
