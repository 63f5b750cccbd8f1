import json,glob,statistics as st,re,sys
D=sys.argv[1] if len(sys.argv) > 1 else '.'
def load(pat):
    out=[]
    for f in sorted(glob.glob(f'{D}/{pat}')):
        try: out.append(json.load(open(f)))
        except Exception as e: pass
    return out
def med(x): return st.median(x) if x else float('nan')
def lat(doc,path,b=8):
    for s in doc['series']:
        if s['path']==path:
            for p in s['points']:
                if p['bytes']==b: return p
for w in 'MN':
    t=[lat(d,'tagged')['latency_us'] for d in load(f'tagged-{w}.*.json')]
    a=[lat(d,'short')['latency_us'] for d in load(f'am-{w}.*.json')]
    rf=[d['probe']['ring_floor_ns'] for d in load(f'am-{w}.*.json')]
    ratio=[x/y for x,y in zip(t,a)]
    r=[d['hop_us'] for d in load(f'ring-{w}.*.json')]
    idl=load(f'idle-{w}.*.json')
    wk=[d['wake_us'] for d in idl]; pw=[d['pipe_wake_us'] for d in idl]; dif=[d['wake_us']-d['pipe_wake_us'] for d in idl]
    tc=load(f'tcp-{w}.*.json')
    ts=[lat(d,'short')['latency_us'] for d in tc]
    raw=[min(x['pingpong_us'] for x in d.get('raw_tcp') or [] if x) for d in tc if d.get('raw_tcp')]
    rawb=[max(x['stream_MBps'] for x in d.get('raw_tcp') or [] if x) for d in tc if d.get('raw_tcp')]
    m1=[lat(d,'memory',1048576)['bandwidth_MBps'] for d in tc if lat(d,'memory',1048576)]
    tr=[x/y for x,y in zip(ts,raw)]
    print(f"{w}: tagged8 {med(t):.3f} {['%.3f'%x for x in t]}; am short {med(a):.3f} {['%.3f'%x for x in a]}; tagged/short {med(ratio):.2f}; ring floor ns {med(rf):.0f} short/floor {med([x*1000/y for x,y in zip(a,rf)]):.2f}")
    print(f"   ring8 {med(r):.3f} {['%.2f'%x for x in r]}; idle wake {med(wk):.1f} pipe {med(pw):.1f} diff {med(dif):.1f} {['%.1f'%x for x in dif]}")
    print(f"   tcp short {med(ts):.2f} raw {med(raw):.2f} ratio {med(tr):.2f} {['%.2f'%x for x in tr]}; 1MiB memory {med(m1):.0f} MB/s raw stream {med(rawb):.0f}")
om=[]
for f in sorted(glob.glob(f'{D}/pingpong-ompi.*.txt')):
    try:
        d=json.loads(open(f).read().strip().splitlines()[-1]); om.append(d['series'][0]['points'][0]['latency_us'])
    except Exception: pass
orr=[]
for f in sorted(glob.glob(f'{D}/ring-ompi.*.txt')):
    try: orr.append(json.loads(open(f).read().strip().splitlines()[-1])['hop_us'])
    except Exception: pass
print(f"OMPI pingpong8 {med(om):.3f} {['%.3f'%x for x in om]}; ring8 {med(orr):.3f} {['%.2f'%x for x in orr]}")
for P in (2,4,8):
    rows={}
    for d in load(f'icoll-P{P}.*.json'):
        for ser in d['series']:
            for pt in ser['points']:
                rows.setdefault((ser['op'],pt['bytes']),[]).append(pt['latency_us'])
    out=[]
    for b in (8,512,4096):
        a=med(rows.get(('allreduce',b),[])); i=med(rows.get(('iallreduce',b),[]))
        out.append(f"{b}B: allreduce {a:.2f} iallreduce {i:.2f} ratio {i/a:.2f}")
    print(f"P={P}: "+"; ".join(out))
