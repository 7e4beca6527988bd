package fm

import (
	"strconv"

	"github.com/adimpi/adimpi/adi/devkit/options"
)

// OptionTable is the MPI device's -device-opt table (mpirun -device-opt
// key=value, or ADIMPI_DEVICE_OPT).
var OptionTable = options.Table{Device: "fm", Options: []options.Option{
	{Key: "packet", Default: strconv.Itoa(DefaultPacket), Min: minPacket, Max: maxPacket, Multiple: 8, Unit: "bytes", Help: "packet size, header included"},
	{Key: "slots", Default: strconv.Itoa(DefaultSlots), Min: 2, Max: 1 << 16, Unit: "packets", Help: "packets per sender's receive region, i.e. credits"},
	{Key: "rndv", Default: strconv.Itoa(defaultRndv), Min: 0, Max: 1 << 30, Unit: "bytes", Help: "largest message sent eagerly"},
	{Key: "bulk", Default: strconv.Itoa(defaultBulk), Min: 0, Max: 1 << 24, Multiple: 64, Unit: "bytes", Help: "bulk lane chunk (0: no bulk lane, rendezvous data in packets)"},
	{Key: "bslots", Default: strconv.Itoa(defaultBulkSlots), Min: 1, Max: 1024, Unit: "chunks", Help: "chunks per sender's bulk lane"},
	{Key: "remote", Default: "0", Choices: []string{"0", "1"}, Help: "offer receive buffers for remote writes"},
	{Key: "minblock", Default: strconv.Itoa(defaultMinBlock), Min: 0, Max: 1 << 30, Unit: "bytes", Help: "with remote=1, least average block of either buffer for a remote write"},
}}

// OptionHelp describes the device's options, one line each (adi.OptionHelper).
func (d *Device) OptionHelp() string { return OptionTable.Help() }
