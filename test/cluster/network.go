package cluster

import (
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
)

// defaultRouteIPv4 is the first IPv4 address of the interface of the IPv4
// default route, or failing that of the first up, non-loopback interface.
func defaultRouteIPv4() (net.IP, error) {
	if data, err := os.ReadFile("/proc/net/route"); err == nil {
		for _, line := range strings.Split(string(data), "\n")[1:] {
			f := strings.Fields(line)
			// Iface Destination Gateway Flags RefCnt Use Metric Mask ...
			if len(f) < 8 || f[1] != "00000000" || f[7] != "00000000" {
				continue
			}
			if flags, err := strconv.ParseUint(f[3], 16, 32); err != nil || flags&1 == 0 { // RTF_UP
				continue
			}
			if ip := interfaceIPv4(f[0]); ip != nil {
				return ip, nil
			}
		}
	}
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	for _, i := range ifs {
		if i.Flags&net.FlagUp == 0 || i.Flags&net.FlagLoopback != 0 {
			continue
		}
		if ip := interfaceIPv4(i.Name); ip != nil {
			return ip, nil
		}
	}
	return nil, errors.New("no default route and no interface with an IPv4 address")
}

func interfaceIPv4(name string) net.IP {
	i, err := net.InterfaceByName(name)
	if err != nil {
		return nil
	}
	addrs, err := i.Addrs()
	if err != nil {
		return nil
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
			return n.IP.To4()
		}
	}
	return nil
}
