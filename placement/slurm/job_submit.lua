-- Every new job (sbatch, srun, salloc) arrives held, with priority 0: Slurm never starts it by itself,
-- and `placement slurm run` decides where and when it starts (scontrol update, then release).
-- Install: copy this file beside slurm.conf and set `JobSubmitPlugins=lua` there, then
-- `scontrol reconfigure`. Jobs submitted before that are not held.
function slurm_job_submit(job_desc, part_list, submit_uid)
   job_desc.priority = 0
   return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
   return slurm.SUCCESS
end
