# snmpsim variation module of the fleetctl switch lab (loaded by snmpsim with
# exec(), never imported by fleetctl). Values are functions of the clock whose
# parameters sit in the .snmprec line, re-read whenever the file changes:
# unlike snmpsim's own `numeric` module, nothing is cached per OID, so the lab
# can stop a counter, start CRC errors or make a port flap by rewriting the
# file, and the counter carries on from where it was.
#
#   70:fleetlab|fn=counter,base=123,rate=1000.5,t0=1700000000.0,bits=64
#   2:fleetlab|fn=flap,period=2,t0=1700000000.0          (ifOperStatus 1/2)
#   67:fleetlab|fn=flapchange,period=2,t0=...,boot=...    (ifLastChange)
#   67:fleetlab|fn=uptime,boot=1700000000.0               (sysUpTime)
import math
import time
from typing import Any


def init(**context: Any) -> None:
    pass


def _params(value: object) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in str(value).split(","):
        k, _, v = part.partition("=")
        if k:
            out[k.strip()] = v.strip()
    return out


def variate(oid: Any, tag: Any, value: Any, **context: Any) -> tuple[Any, Any, Any]:
    if not context["nextFlag"] and not context["exactMatch"]:
        return context["origOid"], tag, context["errorStatus"]
    if context["setFlag"]:
        return context["origOid"], tag, context["errorStatus"]
    p = _params(value)
    fn = p.get("fn", "counter")
    now = time.time()
    if fn == "counter":
        v = float(p.get("base", 0)) + float(p.get("rate", 0)) * max(0.0, now - float(p.get("t0", now)))
        v = int(v) % (2 ** int(p.get("bits", 64)))
    elif fn == "flap":
        period, t0 = float(p["period"]), float(p["t0"])
        v = 1 if int((now - t0) // period) % 2 == 1 else 2
    elif fn == "flapchange":
        period, t0, boot = float(p["period"]), float(p["t0"]), float(p["boot"])
        last = t0 + math.floor((now - t0) / period) * period
        v = int(max(0.0, last - boot) * 100) % 2 ** 32
    elif fn == "uptime":
        v = int(max(0.0, now - float(p["boot"])) * 100) % 2 ** 32
    else:
        return context["origOid"], tag, context["errorStatus"]
    return oid, tag, v


def record(oid: Any, tag: Any, value: Any, **context: Any) -> tuple[Any, Any, Any]:
    raise NotImplementedError("fleetlab: recording is not supported")


def shutdown(**context: Any) -> None:
    pass
