# stories260k_f64.py — an independent float64 forward of stories260K (llama arch) for the
# 5-token prompt 1,403,407,261,378, compared with llama.cpp's golden row 0 and with glim's logits:
#   glim eval -m ../shared/testdata/models/stories260K.gguf --tokens 1,403,407,261,378 --kernels ref --logits-out /tmp/st.f32
#   python3 dev/ref/stories260k_f64.py /tmp/st.f32
# (2026-12-02: double vs golden 0.0076, double vs glim 3.4e-06: the golden, made with llama.cpp's
# flash attention, is the less exact of the two.)
import struct, math, array, sys
f=open(__import__('os').path.join(__import__('os').path.dirname(__file__),'../../../shared/testdata/')+'models/stories260K.gguf','rb').read()
o=4
def u32():
    global o; v=struct.unpack_from('<I',f,o)[0]; o+=4; return v
def u64():
    global o; v=struct.unpack_from('<Q',f,o)[0]; o+=8; return v
def s():
    global o; n=u64(); v=f[o:o+n]; o+=n; return v.decode('utf8','replace')
def val(t):
    global o
    fm={0:'B',1:'b',2:'H',3:'h',4:'I',5:'i',6:'f',7:'?',10:'Q',11:'q',12:'d'}
    if t in fm:
        v=struct.unpack_from('<'+fm[t],f,o)[0]; o+=struct.calcsize(fm[t]); return v
    if t==8: return s()
    if t==9:
        at=u32(); n=u64(); return [val(at) for _ in range(n)]
ver=u32(); nt=u64(); nk=u64()
kv={}
for i in range(nk):
    k=s(); t=u32(); kv[k]=val(t)
ti=[]
for i in range(nt):
    n=s(); nd=u32(); ne=[u64() for _ in range(nd)]; ty=u32(); off=u64(); ti.append((n,ne,ty,off))
align=32; base=(o+align-1)//align*align
W={}
for n,ne,ty,off in ti:
    cnt=1
    for d in ne: cnt*=d
    a=array.array('f'); a.frombytes(f[base+off:base+off+4*cnt]); W[n]=(ne,a)
E=64; L=5; H=8; Hkv=4; D=8; F=172; V=512; eps=kv['llama.attention.layer_norm_rms_epsilon']
def row(name,r):
    ne,a=W[name]; k=ne[0]; return a[r*k:(r+1)*k]
def mat(name,x):
    ne,a=W[name]; k,n=ne[0],ne[1]
    return [math.fsum(a[j*k+i]*x[i] for i in range(k)) for j in range(n)]
def rms(x,w):
    r=1/math.sqrt(sum(v*v for v in x)/len(x)+eps); return [x[i]*r*(w[i] if w else 1) for i in range(len(x))]
def rope(v,p):
    out=list(v)
    for h in range(len(v)//D):
        for i in range(D//2):
            th=p*10000**(-2*i/D); c,s_=math.cos(th),math.sin(th)
            a,b=v[h*D+2*i],v[h*D+2*i+1]
            out[h*D+2*i]=a*c-b*s_; out[h*D+2*i+1]=a*s_+b*c
    return out
toks=[1,403,407,261,378]
xs=[list(row('token_embd.weight',t)) for t in toks]
for l in range(L):
    K=[];Vv=[];Q=[]
    for p,x in enumerate(xs):
        h=rms(x,W['blk.%d.attn_norm.weight'%l][1])
        Q.append(rope(mat('blk.%d.attn_q.weight'%l,h),p)); K.append(rope(mat('blk.%d.attn_k.weight'%l,h),p)); Vv.append(mat('blk.%d.attn_v.weight'%l,h))
    for p in range(len(xs)):
        a=[]
        for h in range(H):
            kh=h//(H//Hkv)
            sc=[sum(Q[p][h*D+i]*K[u][kh*D+i] for i in range(D))/math.sqrt(D) for u in range(p+1)]
            m=max(sc); e=[math.exp(s_-m) for s_ in sc]; z=sum(e)
            a+= [sum(e[u]*Vv[u][kh*D+i] for u in range(p+1))/z for i in range(D)]
        o_=mat('blk.%d.attn_output.weight'%l,a)
        xs[p]=[xs[p][i]+o_[i] for i in range(E)]
    for p in range(len(xs)):
        h=rms(xs[p],W['blk.%d.ffn_norm.weight'%l][1])
        g=mat('blk.%d.ffn_gate.weight'%l,h); u=mat('blk.%d.ffn_up.weight'%l,h)
        y=[g[i]/(1+math.exp(-g[i]))*u[i] for i in range(F)]
        d=mat('blk.%d.ffn_down.weight'%l,y)
        xs[p]=[xs[p][i]+d[i] for i in range(E)]
y=rms(xs[-1],W['output_norm.weight'][1]); lg=mat('output.weight',y)
g=array.array('f'); g.frombytes(open(__import__('os').path.join(__import__('os').path.dirname(__file__),'../../../shared/testdata/')+'goldens/stories260K.greedy64.logits.f32','rb').read()[:V*4])
ours=array.array('f'); ours.frombytes(open(sys.argv[1],'rb').read()[4*V*4:5*V*4])
print('double vs golden', max(abs(lg[i]-g[i]) for i in range(V)))
print('double vs ours  ', max(abs(lg[i]-ours[i]) for i in range(V)))
