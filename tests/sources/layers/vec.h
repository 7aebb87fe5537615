typedef float float4 __attribute__((ext_vector_type(4)));
typedef float float8 __attribute__((ext_vector_type(8)));
typedef float float16 __attribute__((ext_vector_type(16)));
float cos1(float x);
float8 cos8(float8 v);
float16 cos16(float16 v);
float4 vadd(float4 a, float4 b);
float4 vmul(float4 a, float4 b);
float4 poly(float4 x);
