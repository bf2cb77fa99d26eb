#include "transport/rest/rest_server.hpp"

namespace snapflow::rest {

// One self-contained page (no external assets: it must work on a machine without internet)
// that polls the REST API once a second and draws everything itself: the job graph and the
// checkpoint timeline are plain SVG built by the page's own script.
//
// Elements a test (or a script) can rely on, rendered only from live data:
//   #jobs tr[data-job]                 one row per job
//   #graph g.vertex[data-vertex]       one box per operator, with its parallelism
//   #timeline rect.cp-bar[data-checkpoint-id][data-status]   one bar per checkpoint in history
//   #latest-completed[data-checkpoint-id]                     the latest completed checkpoint
//   #breakdown tr.subtask              the selected checkpoint's subtasks, or for a job of more
//                                      than 256 subtasks, tr.operator: one row per operator
//   #checkpoint-now                    triggers a checkpoint of the selected job; #action-status
//                                      says how it went
// Calls that change something send the REST token when the coordinator asks for one (401):
// the page prompts for it once and keeps it in sessionStorage (this tab only).
const std::string& web_page() {
  static const std::string page = R"HTML(<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>snapflow</title>
<style>
body{font-family:system-ui,sans-serif;margin:1.5rem;color:#1d2330;background:#f7f8fa}
h1{font-size:1.3rem;margin:0 0 .5rem}h2{font-size:1.05rem;margin:1.2rem 0 .4rem}
table{border-collapse:collapse;background:#fff;box-shadow:0 1px 2px #0002;margin-bottom:.8rem}
td,th{padding:.3rem .6rem;border-bottom:1px solid #e4e6eb;text-align:left;font-size:.9rem}
td.n{text-align:right;font-variant-numeric:tabular-nums}
th{background:#eef0f4}.RUNNING,.COMPLETED{color:#137333}.FAILED,.FAILING{color:#b3261e}
.IN_PROGRESS,.RESTARTING,.CREATED{color:#9a6700}#overview span,#job-info span{margin-right:1.2rem}
a{color:#0b57d0;cursor:pointer}svg{background:#fff;box-shadow:0 1px 2px #0002;display:block}
.cp-bar{cursor:pointer}.legend span{margin-right:1rem;font-size:.85rem}
.sw{display:inline-block;width:.8rem;height:.8rem;margin-right:.3rem;vertical-align:middle}
#latest-completed{margin:.3rem 0}.muted{color:#667}</style></head>
<body><h1>snapflow</h1><div id="overview"></div>
<h2>Jobs</h2><table id="jobs"></table>
<div id="job" hidden>
 <h2 id="job-title"></h2><div id="job-info"></div>
 <h2>Job graph</h2><svg id="graph" width="10" height="10"></svg>
 <h2>Checkpoints</h2><div><button id="checkpoint-now" type="button">checkpoint now</button>
  <span id="action-status" class="muted"></span></div><div id="cp-counts"></div><div id="latest-completed"></div>
 <svg id="timeline" width="760" height="190"></svg>
 <div class="legend"><span><i class="sw" style="background:#1e8e3e"></i>completed</span>
  <span><i class="sw" style="background:#d93025"></i>failed</span>
  <span><i class="sw" style="background:#f9ab00"></i>in progress</span>
  <span class="muted">click a bar for its subtasks</span></div>
 <h2 id="breakdown-title">Subtasks</h2>
 <div class="legend"><span><i class="sw" style="background:#a142f4"></i>trigger to barrier</span>
  <span><i class="sw" style="background:#f9ab00"></i>alignment</span>
  <span><i class="sw" style="background:#1a73e8"></i>sync</span>
  <span><i class="sw" style="background:#12b5cb"></i>async</span>
  <span><i class="sw" style="background:#bdc1c6"></i>ack on its way</span></div>
 <table id="breakdown"></table>
</div>
<script>
'use strict';
let selected=null,selectedCp=null,follow=true,lastRecords=null,rate=null;
const $=id=>document.getElementById(id);
const esc=s=>String(s).replace(/[&<>"']/g,c=>({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;',"'":'&#39;'}[c]));
async function get(p){const r=await fetch(p);if(!r.ok)throw new Error(p+': HTTP '+r.status);return r.json();}
const tokenKey='snapflow-rest-token';
// A call that changes something: with the token when one is kept; on 401, asks for it once.
async function send(method,p,body){
 const call=()=>{const h={'Content-Type':'application/json'};const t=sessionStorage.getItem(tokenKey);
  if(t)h.Authorization='Bearer '+t;return fetch(p,{method,headers:h,body:body||''});};
 let r=await call();
 if(r.status===401){const t=prompt("This coordinator needs its REST token (its --rest-token-file) for this:");
  if(!t)throw new Error('no token given');sessionStorage.setItem(tokenKey,t.trim());r=await call();
  if(r.status===401)sessionStorage.removeItem(tokenKey);}
 const j=await r.json().catch(()=>({}));
 if(!r.ok)throw new Error((j.errors&&j.errors[0])||('HTTP '+r.status));
 return j;}
async function checkpointNow(){
 if(!selected)return;const job=selected;$('action-status').textContent='triggering…';
 try{const t=await send('POST','/jobs/'+job+'/checkpoints','{}');
  $('action-status').textContent='checkpoint requested ('+t['request-id']+')';}
 catch(e){$('action-status').textContent='not triggered: '+e.message;}}
function us(v){v=Number(v)||0;return v>=1e6?(v/1e6).toFixed(2)+' s':v>=1000?(v/1000).toFixed(2)+' ms':Math.round(v)+' µs';}
function bytes(v){return v>=1048576?(v/1048576).toFixed(1)+' MiB':v>=1024?(v/1024).toFixed(1)+' KiB':v+' B';}
function num(v){return Number(v).toLocaleString('en');}
function svg(tag,attrs,text){const e=document.createElementNS('http://www.w3.org/2000/svg',tag);
 for(const k in attrs)e.setAttribute(k,attrs[k]);if(text!==undefined)e.textContent=text;return e;}
function selectJob(id){selected=id;selectedCp=null;follow=true;lastRecords=null;rate=null;refresh();}
function selectCp(id){selectedCp=id;follow=false;refresh();}

// The job graph: operators in columns by their longest distance from a source.
function drawGraph(d){
 const g=$('graph');g.replaceChildren();
 const depth={};d.vertices.forEach(v=>depth[v.id]=0);
 for(let i=0;i<d.vertices.length;i++)(d.edges||[]).forEach(e=>{depth[e.target]=Math.max(depth[e.target],depth[e.source]+1);});
 const cols={};d.vertices.forEach(v=>(cols[depth[v.id]]=cols[depth[v.id]]||[]).push(v));
 const W=190,H=64,GX=60,GY=18,pos={};let maxRows=1,ncols=0;
 Object.keys(cols).forEach(c=>{ncols=Math.max(ncols,+c+1);maxRows=Math.max(maxRows,cols[c].length);
  cols[c].forEach((v,i)=>pos[v.id]={x:10+c*(W+GX),y:10+i*(H+GY)});});
 g.setAttribute('width',20+ncols*(W+GX)-GX);g.setAttribute('height',20+maxRows*(H+GY)-GY);
 g.appendChild(svg('defs',{})).innerHTML='<marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto"><path d="M0,0L10,5L0,10z" fill="#80868b"/></marker>';
 (d.edges||[]).forEach(e=>{const a=pos[e.source],b=pos[e.target];if(!a||!b)return;
  const x1=a.x+W,y1=a.y+H/2,x2=b.x,y2=b.y+H/2;
  g.appendChild(svg('path',{d:`M${x1},${y1}C${x1+GX/2},${y1} ${x2-GX/2},${y2} ${x2},${y2}`,fill:'none',stroke:'#80868b','marker-end':'url(#arrow)'}));
  g.appendChild(svg('text',{x:(x1+x2)/2,y:(y1+y2)/2-4,'text-anchor':'middle','font-size':10,fill:'#5f6368'},e.ship_strategy));});
 d.vertices.forEach(v=>{const p=pos[v.id];
  const box=svg('g',{class:'vertex','data-vertex':v.id,'data-parallelism':v.parallelism,transform:`translate(${p.x},${p.y})`});
  const color=v.status==='FAILED'?'#d93025':v.status==='RUNNING'?'#1e8e3e':v.status==='FINISHED'?'#1a73e8':'#f9ab00';
  box.appendChild(svg('rect',{width:W,height:H,rx:6,fill:'#fff',stroke:color,'stroke-width':2}));
  box.appendChild(svg('text',{x:8,y:17,'font-size':13,'font-weight':600},v.uid.length>24?v.uid.slice(0,23)+'…':v.uid));
  box.appendChild(svg('text',{x:8,y:34,'font-size':11,fill:'#5f6368'},`${v.kind} ×${v.parallelism}`));
  const m=v.metrics||{};
  box.appendChild(svg('text',{x:8,y:52,'font-size':11,fill:'#5f6368'},`in ${num(m['read-records']||0)} · out ${num(m['write-records']||0)}`));
  box.appendChild(svg('title',{},`${v.name} (${v.kind}), parallelism ${v.parallelism}, max ${v.maxParallelism}, ${v.status}`));
  g.appendChild(box);});
}

// The timeline: one bar per checkpoint in the history, oldest left, height = duration.
function drawTimeline(c){
 const t=$('timeline');t.replaceChildren();
 const hist=c.history.slice().reverse(),W=760,H=190,L=58,B=22,T=8;
 const max=Math.max(1,...hist.map(x=>x.end_to_end_duration_us||0));
 for(let i=0;i<=4;i++){const y=T+(H-T-B)*(1-i/4);
  t.appendChild(svg('line',{x1:L,x2:W-4,y1:y,y2:y,stroke:'#e4e6eb'}));
  t.appendChild(svg('text',{x:L-6,y:y+4,'text-anchor':'end','font-size':10,fill:'#5f6368'},us(max*i/4)));}
 if(!hist.length){t.appendChild(svg('text',{x:W/2,y:H/2,'text-anchor':'middle',fill:'#80868b'},'no checkpoints yet'));return;}
 const step=(W-L-8)/hist.length,bw=Math.max(2,Math.min(26,step*0.7));
 hist.forEach((x,i)=>{
  const h=Math.max(2,(H-T-B)*(x.end_to_end_duration_us||0)/max),bx=L+4+i*step+(step-bw)/2,by=H-B-h;
  const color=x.status==='FAILED'?'#d93025':x.status==='COMPLETED'?'#1e8e3e':'#f9ab00';
  const r=svg('rect',{class:'cp-bar '+x.status,'data-checkpoint-id':x.id,'data-status':x.status,x:bx,y:by,width:bw,height:h,fill:color,
   stroke:x.id===selectedCp?'#1d2330':'none','stroke-width':2});
  r.appendChild(svg('title',{},`#${x.id} ${x.status} ${x.checkpoint_type} ${us(x.end_to_end_duration_us)}, ${x.num_acknowledged_subtasks}/${x.num_subtasks} acks${x.failure_message?' — '+x.failure_message:''}`));
  r.addEventListener('click',()=>selectCp(x.id));t.appendChild(r);
  if(x.status==='FAILED')t.appendChild(svg('text',{x:bx+bw/2,y:by-3,'text-anchor':'middle','font-size':12,fill:'#d93025','font-weight':700},'✕'));
  if(hist.length<=30||i%Math.ceil(hist.length/30)===0)
   t.appendChild(svg('text',{x:bx+bw/2,y:H-7,'text-anchor':'middle','font-size':10,fill:'#5f6368'},x.id));});
}

// The selected checkpoint's subtasks: a table with one stacked bar of its stages each.
function drawBreakdown(det,names){
 $('breakdown-title').textContent=`Subtasks of checkpoint #${det.id} (${det.status}, ${det.checkpoint_type})`;
 const rows=(det.subtasks||[]).slice().sort((a,b)=>a.vertex-b.vertex||a.index-b.index);
 const max=Math.max(1,...rows.map(s=>s.end_to_end_duration_us||0));
 let h='<tr><th>operator</th><th>subtask</th><th>end to end</th><th>stages</th><th>trigger→barrier</th><th>alignment</th><th>sync</th><th>async</th><th>in flight</th><th>written</th><th>state</th></tr>';
 rows.forEach(s=>{const e=s.end_to_end_duration_us||0,d=s.start_delay_us||0,a=s.alignment.duration_us||0,
   sy=s.checkpoint.sync_us||0,as=s.checkpoint.async_us||0,rest=Math.max(0,e-d-a-sy-as);
  const seg=(v,c)=>`<span style="display:inline-block;height:10px;background:${c};width:${(160*v/max).toFixed(1)}px"></span>`;
  h+=`<tr class="subtask" data-vertex="${s.vertex}" data-index="${s.index}"><td>${esc(names[s.vertex]||s.vertex)}</td><td class="n">${s.index}</td><td class="n">${us(e)}</td>`+
   `<td style="white-space:nowrap">${seg(d,'#a142f4')}${seg(a,'#f9ab00')}${seg(sy,'#1a73e8')}${seg(as,'#12b5cb')}${seg(rest,'#bdc1c6')}</td>`+
   `<td class="n">${us(d)}</td><td class="n">${us(a)}</td><td class="n">${us(sy)}</td><td class="n">${us(as)}</td><td class="n">${s.unaligned_checkpoint?'unaligned, '+bytes(s.persisted_data||0):'aligned'}</td><td class="n">${bytes(s.checkpointed_size)}</td><td class="n">${bytes(s.state_size)}</td></tr>`;});
 if(!rows.length&&det.tasks&&!det.subtasks){
  // Too many subtasks to list: one row per operator from the per-vertex summary.
  $('breakdown-title').textContent=`Operators of checkpoint #${det.id} (${det.status}, ${det.checkpoint_type}; ${det.num_subtasks} subtasks)`;
  h='<tr><th>operator</th><th>acknowledged</th><th>end to end min / avg / max</th><th>max trigger→barrier</th><th>max alignment</th><th>written</th><th>state</th></tr>';
  det.tasks.forEach(t=>{const e=t.end_to_end_duration;
   h+=`<tr class="operator" data-vertex="${t.vertex}"><td>${esc(t.uid)}</td><td class="n">${t.num_acknowledged_subtasks} / ${t.num_subtasks}</td>`+
    `<td class="n">${us(e.min_us)} / ${us(e.avg_us)} / ${us(e.max_us)}</td><td class="n">${us(t.max_start_delay_us)}</td><td class="n">${us(t.max_alignment_duration_us)}</td><td class="n">${bytes(t.checkpointed_size)}</td><td class="n">${bytes(t.state_size)}</td></tr>`;});
 }else if(!rows.length)h+='<tr><td colspan="11" class="muted">no acknowledgements yet</td></tr>';
 $('breakdown').innerHTML=h;
}

async function refresh(){
 try{
  const o=await get('/overview');
  $('overview').innerHTML=
   `<span>workers: ${o.taskmanagers}</span><span>slots: ${o['slots-available']}/${o['slots-total']} free</span>`+
   `<span>running: ${o['jobs-running']}</span><span>finished: ${o['jobs-finished']}</span><span>failed: ${o['jobs-failed']}</span>`;
  const j=await get('/jobs');
  $('jobs').innerHTML='<tr><th>job</th><th>name</th><th>status</th></tr>'+
   j.jobs.map(x=>`<tr data-job="${esc(x.id)}"><td><a data-select="${esc(x.id)}">${esc(x.id)}</a></td><td>${esc(x.name)}</td><td class="${esc(x.status)}">${esc(x.status)}</td></tr>`).join('');
  document.querySelectorAll('#jobs a[data-select]').forEach(a=>a.addEventListener('click',()=>selectJob(a.dataset.select)));
  if(!selected&&j.jobs.length)selected=j.jobs[j.jobs.length-1].id;
  if(!selected)return;
  const d=await get('/jobs/'+selected);
  $('job').hidden=false;
  $('job-title').innerHTML=`${esc(d.name)} <span class="${esc(d.state)}">${esc(d.state)}</span>`;
  // records/s from two heartbeat-stamped counts, not from this page's polling times.
  const rec=d['source-records']||0,ts=d['records-timestamp']||0;
  if(lastRecords&&ts>lastRecords.ts&&rec>=lastRecords.rec)rate=(rec-lastRecords.rec)*1000/(ts-lastRecords.ts);
  if(!lastRecords||ts>lastRecords.ts)lastRecords={rec,ts};
  $('job-info').innerHTML=`<span>restarts: ${d.restarts}</span><span>records from sources: ${num(rec)}</span>`+
   `<span>records/s: ${rate===null?'–':num(Math.round(rate))}</span>`+(d['failure-cause']?`<span class="FAILED">${esc(d['failure-cause'])}</span>`:'');
  drawGraph(d);
  const names={};d.vertices.forEach(v=>names[v.id]=v.uid);
  let c;try{c=await get('/jobs/'+selected+'/checkpoints');}catch(e){c=null;}
  if(!c||!c.counts){$('cp-counts').textContent='checkpointing is off for this job';$('timeline').replaceChildren();$('breakdown').innerHTML='';return;}
  const s=c.summary.end_to_end_duration_us;
  $('cp-counts').innerHTML=`completed ${c.counts.completed}, failed ${c.counts.failed}, in progress ${c.counts.in_progress}, restored ${c.counts.restored}`+
   ` · end to end p50 ${us(s.p50)}, p99 ${us(s.p99)}, max ${us(s.max)}`;
  const lc=c.latest.completed;
  if(lc){$('latest-completed').dataset.checkpointId=lc.id;
   $('latest-completed').innerHTML=`latest completed: <b>#${lc.id}</b> in ${us(lc.end_to_end_duration_us)}, ${bytes(lc.checkpointed_size)} written, state ${bytes(lc.state_size)}`;}
  else{delete $('latest-completed').dataset.checkpointId;$('latest-completed').textContent='no completed checkpoint yet';}
  if(follow||!c.history.some(x=>x.id===selectedCp))selectedCp=lc?lc.id:(c.history.length?c.history[0].id:null);
  drawTimeline(c);
  // A job of thousands of subtasks would fetch megabytes a second: its operators' summary only.
  const many=d.vertices.reduce((n,v)=>n+v.parallelism,0)>maxListedSubtasks;
  if(selectedCp!==null){try{drawBreakdown(await get(`/jobs/${selected}/checkpoints/details/${selectedCp}`+(many?'?subtasks=none':'')),names);}catch(e){}}
 }catch(e){$('overview').textContent='coordinator unreachable: '+e;}
}
const maxListedSubtasks=256;
$('checkpoint-now').addEventListener('click',checkpointNow);
refresh();setInterval(refresh,1000);
</script></body></html>
)HTML";
  return page;
}

}  // namespace snapflow::rest
