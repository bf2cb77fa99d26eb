#include "transport/rest/rest_server.hpp"

namespace snapflow::rest {

// One self-contained page (no external assets: it must work on a machine without internet)
// that polls the REST API once a second.
const std::string& web_page() {
  static const std::string page = R"HTML(<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>snapflow</title>
<style>
body{font-family:system-ui,sans-serif;margin:1.5rem;color:#1d2330;background:#f7f8fa}
h1{font-size:1.3rem;margin:0 0 .5rem}h2{font-size:1.05rem;margin:1.2rem 0 .4rem}
table{border-collapse:collapse;background:#fff;box-shadow:0 1px 2px #0002;margin-bottom:.8rem}
td,th{padding:.3rem .6rem;border-bottom:1px solid #e4e6eb;text-align:left;font-size:.9rem}
th{background:#eef0f4}.RUNNING,.COMPLETED{color:#137333}.FAILED,.FAILING{color:#b3261e}
.IN_PROGRESS,.RESTARTING,.CREATED{color:#9a6700}#overview span{margin-right:1.2rem}
a{color:#0b57d0;cursor:pointer}</style></head>
<body><h1>snapflow</h1><div id="overview"></div><h2>Jobs</h2><table id="jobs"></table>
<div id="job"></div>
<script>
let selected=null;
const esc=s=>String(s).replace(/[&<>"]/g,c=>({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;'}[c]));
async function get(p){const r=await fetch(p);return r.json();}
function us(v){return v>=1000?(v/1000).toFixed(2)+' ms':Math.round(v)+' µs';}
async function refresh(){
 try{
  const o=await get('/overview');
  document.getElementById('overview').innerHTML=
   `<span>workers: ${o.taskmanagers}</span><span>slots: ${o['slots-available']}/${o['slots-total']} free</span>`+
   `<span>running: ${o['jobs-running']}</span><span>finished: ${o['jobs-finished']}</span><span>failed: ${o['jobs-failed']}</span>`;
  const j=await get('/jobs');
  document.getElementById('jobs').innerHTML='<tr><th>job</th><th>name</th><th>status</th></tr>'+
   j.jobs.map(x=>`<tr><td><a onclick="selected='${x.id}';refresh()">${x.id}</a></td><td>${esc(x.name)}</td><td class="${x.status}">${x.status}</td></tr>`).join('');
  if(!selected&&j.jobs.length)selected=j.jobs[0].id;
  if(selected){
   const d=await get('/jobs/'+selected);const c=await get('/jobs/'+selected+'/checkpoints');
   let h=`<h2>${esc(d.name)} <span class="${d.state}">${d.state}</span></h2>`+
    `<div>restarts: ${d.restarts}${d['failure-cause']?' — '+esc(d['failure-cause']):''}</div>`+
    '<table><tr><th>operator</th><th>kind</th><th>parallelism</th><th>status</th></tr>'+
    d.vertices.map(v=>`<tr><td>${esc(v.uid)}</td><td>${esc(v.kind)}</td><td>${v.parallelism}</td><td class="${v.status}">${v.status}</td></tr>`).join('')+'</table>';
   if(c.counts){const s=c.summary.end_to_end_duration_us;
    h+=`<h2>Checkpoints</h2><div>completed ${c.counts.completed}, failed ${c.counts.failed}, in progress ${c.counts.in_progress}, restored ${c.counts.restored}</div>`+
     `<div>end to end: p50 ${us(s.p50)}, p99 ${us(s.p99)}, max ${us(s.max)}</div>`+
     '<table><tr><th>id</th><th>status</th><th>type</th><th>acks</th><th>duration</th><th>size</th></tr>'+
     c.history.map(x=>`<tr><td>${x.id}</td><td class="${x.status}">${x.status}</td><td>${x.checkpoint_type}</td><td>${x.num_acknowledged_subtasks}/${x.num_subtasks}</td><td>${us(x.end_to_end_duration_us)}</td><td>${x.state_size} B</td></tr>`).join('')+'</table>';}
   document.getElementById('job').innerHTML=h;}
 }catch(e){document.getElementById('overview').textContent='coordinator unreachable: '+e;}
}
refresh();setInterval(refresh,1000);
</script></body></html>
)HTML";
  return page;
}

}  // namespace snapflow::rest
